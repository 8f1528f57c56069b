"""Input and output safety: limits, safe readers, atomic writes, output-path checks.

* :mod:`moesim.io.limits` - the input limits table and :func:`check_limit`
* :mod:`moesim.io.read` - regular files only, size-limited, UTF-8
* :mod:`moesim.io.yaml_read` - safe YAML with an alias budget and a nesting limit
* :mod:`moesim.io.json_read` - JSON with a nesting limit
* :mod:`moesim.io.outputs` - outputs checked before the work and written atomically
* :mod:`moesim.io.quote` - a short quote of a bad value for an error message

Nothing here knows about MoE or simulation: the package sits on the bottom floor.
"""

from moesim.io.json_read import load_json_text, read_json
from moesim.io.limits import LIMITS, Limit, check_limit, limits_table
from moesim.io.outputs import atomic_target, check_output, check_outputs, same_file, write_atomic
from moesim.io.quote import short
from moesim.io.read import decode_utf8, read_bytes, read_text
from moesim.io.yaml_read import load_yaml_text, read_yaml

__all__ = [
    "LIMITS",
    "Limit",
    "atomic_target",
    "check_limit",
    "check_output",
    "check_outputs",
    "decode_utf8",
    "limits_table",
    "load_json_text",
    "load_yaml_text",
    "read_bytes",
    "read_json",
    "read_text",
    "read_yaml",
    "same_file",
    "short",
    "write_atomic",
]
