"""Parametric geometries meshed with gmsh (test and benchmark parts)."""
