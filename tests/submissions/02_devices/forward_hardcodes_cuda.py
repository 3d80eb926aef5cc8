# solution: forward-on
# fails: forward-on-cpu forward-on-any-device forward-on-no-grad forward-on-eval forward-on-no-parameters
# says: cuda
# Typical mistake: the device is hard-coded, so the code only runs on an NVIDIA GPU.
def forward_on(model, x, device):
    model = model.cuda().eval()
    with torch.no_grad():
        return model(x.cuda())
