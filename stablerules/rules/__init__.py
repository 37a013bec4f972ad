"""One module per op family: the op, its rrule and frule, and their kernel generators."""
