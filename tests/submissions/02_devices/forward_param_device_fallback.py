# solution: forward-on
# fails: forward-on-no-parameters
# says: move the input
# Typical mistake: the input follows the parameters' device, falling back to where the input already
# is when there are none, so a parameter-free module runs on the wrong device.
def forward_on(model, x, device):
    model.to(device).eval()
    target = next((p.device for p in model.parameters()), x.device)
    with torch.no_grad():
        return model(x.to(target))
