# solution: forward-on
# fails:
# says:
# Correct, written differently: the caller's model is left alone; a copy is moved and evaluated.
import copy


def forward_on(model, x, device):
    model = copy.deepcopy(model).to(device).eval()
    with torch.set_grad_enabled(False):
        y = model(x.to(device))
    return y
