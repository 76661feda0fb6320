"""Small helpers at the bottom of the package, importable from every
layer."""
