"""The DDP worker's models (the seed's CNN, a ResNet-18-shaped net) and its learnable synthetic data
(see ddp_worker's docstring). torch is passed in: this module imports nothing."""

CLASSES = 10


# --------------------------------------------------------------------------- models


def build_model(torch, name, channels, size, width):
    nn = torch.nn
    if name == "cnn":
        # The cloud-Slurm seed's model, as the probe's bench_torch trains it.
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 26 * 26, 128), nn.ReLU(),
                             nn.Linear(128, CLASSES))

    # "large": a ResNet-18-shaped net (4 stages of 2 basic blocks, widths W, 2W, 4W, 8W, strides
    # 1, 2, 2, 2) on 3x64x64 images. Why this one: data-parallel scaling is governed by compute per
    # step against the bytes all-reduced per step. The seed's CNN has 2.77 M parameters (11.1 MB of fp32
    # gradients) for 5.9 MFLOP forward per image (~18 MFLOP forward+backward): a step of 64 images is
    # ~1.1 GFLOP (microseconds on an H100/H200) against an 11 MB all-reduce, ~100 FLOP per gradient
    # byte, so it measures communication and launch latency. This net at W=64 on 3x64x64 has 11.19 M
    # parameters (45 MB of gradients) but 4.4 GFLOP forward per image (~13 GFLOP forward+backward):
    # ~850 GFLOP per step of 64 images, ~19,000 FLOP per gradient byte, so compute dominates and
    # DDP's bucketed all-reduce hides behind the backward pass. (The JSON reports both figures:
    # forward_flops_per_image and gradient_bytes.) The classifier keeps a 4x4 spatial map
    # (AdaptiveAvgPool2d(4)) because the labels depend on where the template's features are (see
    # the head below). --width and --image-size scale it down for CPU tests. BatchNorm running statistics stay per rank (broadcast_buffers=False), so
    # the only communication per step is the gradient all-reduce.

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            nn.init.zeros_(self.bn2.weight)  # each block starts as the identity (Goyal et al. 2017): stable at lr 0.03
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

    layers = [nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for i, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2 ** i
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    # Head: a 4x4 map of 32 channels (512 features whatever the width) keeps where features are; a linear
    # layer straight on the 8W x 4 x 4 map (8,192 features at W=64) made SGD's first steps diverge.
    layers += [nn.AdaptiveAvgPool2d(4), nn.Conv2d(cin, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.Flatten(),
               nn.Linear(32 * 16, CLASSES)]
    return nn.Sequential(*layers)


def forward_flops(torch, model, shape, device):
    """Multiply-adds x 2 of the convolutions and linear layers for one image (forward only)."""
    total = [0]
    nn = torch.nn

    def hook(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            total[0] += 2 * output.numel() * (module.in_channels // module.groups) * kh * kw
        elif isinstance(module, nn.Linear):
            total[0] += 2 * output.numel() * module.in_features

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            model(torch.zeros((1,) + tuple(shape), device=device))
        model.train(was_training)
    finally:
        for h in handles:
            h.remove()
    return total[0]


# --------------------------------------------------------------------------- synthetic data


class Synthetic:
    """Learnable synthetic images whose label is a function of the image (see the docstring)."""

    TRAIN, HELD_OUT = 0, 1 << 40

    def __init__(self, torch, shape, batch, seed, device, signal=0.2):
        self.torch, self.shape, self.batch, self.seed, self.device, self.signal = torch, tuple(shape), batch, seed, device, signal
        cpu = torch.Generator().manual_seed(seed)
        channels, height, width = self.shape
        coarse = torch.randn(CLASSES, channels, max(2, height // 7), max(2, width // 7), generator=cpu)
        smooth = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
        flat = smooth.reshape(CLASSES, -1)
        flat = (flat - flat.mean(dim=1, keepdim=True)) / flat.std(dim=1, keepdim=True)  # zero mean, unit variance per pixel
        self.templates = flat.reshape((CLASSES,) + self.shape).to(device)
        self.flat = flat.t().contiguous().to(device)  # (pixels, classes)
        self.generator = torch.Generator(device=device)

    def block(self, index, split=TRAIN):
        torch = self.torch
        self.generator.manual_seed((self.seed * 1000003 + split + index) % (1 << 62))
        c = torch.randint(0, CLASSES, (self.batch,), generator=self.generator, device=self.device)
        x = torch.randn((self.batch,) + self.shape, generator=self.generator, device=self.device)
        x.add_(self.templates[c], alpha=self.signal)
        y = (x.reshape(self.batch, -1) @ self.flat).argmax(dim=1)
        return x, y

    def order(self, epoch, blocks):
        g = self.torch.Generator().manual_seed(self.seed * 7919 + epoch)
        return self.torch.randperm(blocks, generator=g).tolist()
