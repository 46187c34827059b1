"""Offline scoring: `rlvr score --env NAME INPUT -o OUTPUT`.

A file of (task, completion) rows -> one output row per input row, through the same Reward
objects and worker pool the trainer uses. Properties that matter on a million rows:

- **streams**: rows are read, scored and written in chunks, a few at a time, so memory stays
  flat;
- **parallel and cheap on IPC**: workers get chunks of raw lines (each about 50 ms of work) and
  send back the finished output bytes and a few counts, so this process does no per-row work;
  the deadline still applies to each row (`rlvr.pool.mark_step`);
- **resumable**: output rows are written in input order and carry their input `line`; a rerun
  after a kill truncates a half-written last line and continues after the last finished line;
- **nothing lost**: a malformed row becomes an error row with its line number, a hung row a
  timeout row; neither stops the run.
"""
from .run import ScoreConfig, score_file
from .summary import ScoreSummary

__all__ = ["ScoreConfig", "ScoreSummary", "score_file"]
