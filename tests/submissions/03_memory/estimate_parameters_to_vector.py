# solution: estimate-memory
# fails:
# says:
from torch.nn.utils import parameters_to_vector


def training_memory(model, dtype):
    """Written differently: parameters_to_vector for the counts, float bytes from finfo().bits / 8."""
    per = torch.finfo(dtype).bits / 8
    everything = parameters_to_vector(model.parameters()).numel()
    trainable = [p for p in model.parameters() if p.requires_grad]
    n_train = parameters_to_vector(trainable).numel() if trainable else 0
    return {"adam_state": 2 * n_train * per, "gradients": n_train * per, "parameters": everything * per}
