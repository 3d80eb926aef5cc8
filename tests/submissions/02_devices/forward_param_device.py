# solution: forward-on
# fails: forward-on-no-parameters
# says: StopIteration
# Typical mistake: the input follows next(model.parameters()).device instead of `device`, which
# crashes for a module without parameters (nn.ReLU). Otherwise correct: inference_mode decorator,
# train(False).
@torch.inference_mode()
def forward_on(model, x, device):
    model.to(device)
    model.train(False)
    x = x.to(next(model.parameters()).device)
    return model(x)
