"""Experimental designs over a factor space."""
