# solution: fast-step
# fails:
# says:
# Correct, written differently: float32 (held to float32's rounding), zero_grad(set_to_none=False), AdamW's weight decay spelled out, the losses copied to the host once.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y, reduction="mean")
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    on_host = torch.stack(losses).cpu()
    return on_host.tolist()
