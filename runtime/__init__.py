"""tvms.runtime: devices, tensors and compiled modules (later issues)."""
