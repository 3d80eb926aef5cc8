# solution: forward-on
# fails: forward-on-no-grad
# says: set_grad_enabled(False) on its own
# Typical mistake: gradients switched off for the whole program, never switched back on.
def forward_on(model, x, device):
    torch.set_grad_enabled(False)
    model = model.to(device)
    model.eval()
    return model(x.to(device))
