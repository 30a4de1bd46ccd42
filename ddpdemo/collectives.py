"""Old home of chapter 1's before/after figure, which holds no collective:
use ddpdemo.figures (`from ddpdemo.figures import by_collective,
plot_collectives`). Kept so existing imports keep working.
"""
from .figures import by_collective, plot_collectives

__all__ = ["by_collective", "plot_collectives"]
