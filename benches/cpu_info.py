"""The CPU a side-by-side figure was measured on, for the scripts in this folder."""

import platform


def cpu_model():
    """The model name /proc/cpuinfo gives, with its family and model numbers (two Xeons of
    these machines share one name), else what platform knows."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name
