"""Training: configuration, updaters, learning-rate schedules, the compiled train step, ``fit``."""
