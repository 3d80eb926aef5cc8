# solution: forward-on
# fails:
# says:
# Correct, written differently: inference_mode as a decorator, train(False), keyword arguments.
@torch.inference_mode()
def forward_on(model, x, device):
    model.to(device=device)
    model.train(False)
    return model(x.to(device=device))
