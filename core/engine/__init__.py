"""The episode engine: one episode's loop, sessions, trajectories and token rows, grading, and the
executor that fans episodes out (in process, to worker processes, to Ray)."""
