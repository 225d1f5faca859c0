"""Configuration, parsed and validated once at the edge into frozen dataclasses: the spec
(Point, Budget, SweepSpec), convergence settings, suite files, precisions, single-value checks
and ConfigError."""
