# solution: fast-step
# fails:
# says:
# Correct, written differently: bfloat16 autocast spelled out, parameter groups, the losses summed into a tensor list.
def fast_step(model, batches, lr=1e-2):
    groups = [{"params": [p for n, p in model.named_parameters() if n.endswith("weight")]},
              {"params": [p for n, p in model.named_parameters() if not n.endswith("weight")]}]
    optimizer = torch.optim.AdamW(groups, lr=lr, fused=True)
    kept = []
    for inputs, targets in batches:
        for p in model.parameters():
            p.grad = None
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=inputs.device.type == "cpu"):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float(), targets)
        loss.backward()
        optimizer.step()
        kept.append(loss.detach())
    return torch.cat([k.reshape(1) for k in kept]).tolist()
