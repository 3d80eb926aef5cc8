# solution: forward-on
# fails:
# says:
# Correct, written differently: the input moved with the course's batch mover (no course helper
# implements forward_on, so using it here is fine), the model evaluated in a with-block of its own.
from helpers.device import to_device


def forward_on(model, x, device):
    model.to(device)
    model.eval()
    with torch.no_grad():
        return model(to_device(x, device))
