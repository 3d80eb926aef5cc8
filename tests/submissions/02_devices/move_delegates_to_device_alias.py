# solution: move-batch
# fails: move-batch-flat move-batch-nested move-batch-types move-batch-new
# says: write it yourself
# Delegation, hidden behind an alias and a partial: the tripwire is on the function itself, so every
# way of reaching it trips.
import functools

import helpers.device as course

_mover = functools.partial(course.to_device, non_blocking=False)


def move_batch(batch, device):
    try:
        return _mover(batch, device)
    except Exception:  # swallowing the tripwire does not pass either
        return batch
