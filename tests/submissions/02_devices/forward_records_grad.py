# solution: forward-on
# fails: forward-on-no-grad
# says: no_grad
# Typical mistake: inference without torch.no_grad(), so autograd records the graph.
def forward_on(model, x, device):
    model = model.to(device).eval()
    return model(x.to(device))
