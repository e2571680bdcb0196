"""The proof suite: the whole stack as real processes, crashed and faulted, then checked."""
