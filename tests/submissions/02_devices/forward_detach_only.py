# solution: forward-on
# fails: forward-on-no-grad
# says: detach
# Typical mistake: the graph is recorded and only the output is detached afterwards.
def forward_on(model, x, device):
    model = model.to(device).eval()
    return model(x.to(device)).detach()
