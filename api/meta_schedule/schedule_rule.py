"""``tvms.meta_schedule.schedule_rule``: the rules a PostOrderApply space applies to each block."""
from ..lowering.tune.rule_add_rfactor import AddRFactor  # noqa: F401
from ..lowering.tune.rule_apply_custom import ApplyCustomRule  # noqa: F401
from ..lowering.tune.rule_auto_bind import AutoBind  # noqa: F401
from ..lowering.tune.rule_auto_inline import AutoInline, InlineConstantScalars  # noqa: F401
from ..lowering.tune.rule_cross_thread_reduction import CrossThreadReduction  # noqa: F401
from ..lowering.tune.rule_multi_level_tiling import MultiLevelTiling, ReuseType  # noqa: F401
from ..lowering.tune.rule_multi_level_tiling_tensor_core import MultiLevelTilingTensorCore  # noqa: F401
from ..lowering.tune.rule_parallel_vectorize_unroll import ParallelizeVectorizeUnroll  # noqa: F401
from ..lowering.tune.rule_random_compute_location import RandomComputeLocation  # noqa: F401
from ..lowering.tune.schedule_rule import PyScheduleRule, ScheduleRule  # noqa: F401
