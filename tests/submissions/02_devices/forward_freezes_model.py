# solution: forward-on
# fails: forward-on-no-grad
# says: requires_grad=False
# Typical mistake: no graph is recorded because the parameters are frozen, for good.
def forward_on(model, x, device):
    model = model.to(device).eval().requires_grad_(False)
    return model(x.to(device))
