# solution: seed-numpy-worker
# fails: 
# says: 
def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    import numpy
    from torch.utils.data import get_worker_info as who

    info = who()
    info.dataset.rng = numpy.random.Generator(numpy.random.PCG64(info.seed))
