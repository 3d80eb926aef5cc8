# solution: forward-on
# fails: forward-on-any-device
# says: .cpu()
# Typical mistake: the output is copied back to the CPU before it is returned.
def forward_on(model, x, device):
    model = model.to(device).eval()
    with torch.no_grad():
        return model(x.to(device)).cpu()
