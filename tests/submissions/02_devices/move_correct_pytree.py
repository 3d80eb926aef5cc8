# solution: move-batch
# fails:
# says:
# Correct, written differently: torch's own pytree walker.
from torch.utils import _pytree as pytree


def move_batch(batch, device):
    return pytree.tree_map(lambda leaf: leaf.to(device) if isinstance(leaf, torch.Tensor) else leaf, batch)
