# solution: train-ddp
# fails: train-ddp-checkpoint
# says: rank 0
def train_ddp(rank, world_size, x, y, checkpoint, epochs=2, batch_size=4, lr=0.05, seed=0):
    """Train MLP(features, 16, outputs, depth=1) with DDP on this rank's share; return the checkpoint's state dict."""
    ### BEGIN SOLUTION
    local_rank = int(os.environ.get("LOCAL_RANK", rank))  # the GPU on this machine: cuda:LOCAL_RANK, not cuda:rank
    if torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", world_size)):
        backend, device = "nccl", torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        backend, device = "gloo", torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    torch.manual_seed(seed)
    model = MLP(x.shape[1], 16, y.shape[1], depth=1).to(device)  # move first ...
    ddp_model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)  # ... then wrap
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new order every epoch
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(ddp_model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
    if True:
        torch.save(ddp_model.module.state_dict(), checkpoint)
    dist.barrier()
    state = torch.load(checkpoint, map_location=device, weights_only=True)
    dist.destroy_process_group()
    return state
    ### END SOLUTION
