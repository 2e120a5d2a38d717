"""Package data: the TVMScript grammar."""
