"""Named hardware presets: one TOML file per preset in this folder, each with a comment block
saying where its numbers come from. ``names()`` lists them; ``sim.load_hw(name)`` loads one."""
from __future__ import annotations

from pathlib import Path

_DIR = Path(__file__).resolve().parent


def names() -> list[str]:
    return sorted(p.stem for p in _DIR.glob("*.toml"))


def path(name: str) -> Path:
    p = _DIR / f"{name}.toml"
    if not p.is_file():
        from ..config import HardwareError
        raise HardwareError(f"unknown hardware preset '{name}' (presets: {', '.join(names())})")
    return p
