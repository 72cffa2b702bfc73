"""The wide zoo's written-out networks: families torchvision lacks, in plain torch.nn.

Imported by make_zoo.py (Debian's torch 1.13, /usr/bin/python3). Each class is a network of a kind
users bring, written the way its usual source writes it, so that the exporter emits what it emits
for those: token embeddings (Gather), attention as MatMul / Softmax with an additive mask, a causal
mask through masked_fill (Where), GPT-2's tanh-approximated GELU spelled out, LayerNorm, 1-D and
3-D convolutions and pooling, dilated convolutions, GRU / LSTM (bidirectional), transposed
convolutions, GroupNorm. The sizes are parameters: make_zoo.py builds each at a full size (for the
bench) and at a small one (for the tests).
"""
import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head attention written out (q, k, v projections, scaled scores, softmax)."""

    def __init__(self, dim, heads, bias=True):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    def forward(self, x, additive_mask=None, kv=None):
        n, t, d = x.shape
        h = self.heads
        if kv is None:
            q, k, v = self.qkv(x).split(d, dim=2)
        else:  # cross-attention: queries from x, keys and values from kv
            w, b = self.qkv.weight, self.qkv.bias
            q = nn.functional.linear(x, w[:d], None if b is None else b[:d])
            k, v = nn.functional.linear(kv, w[d:], None if b is None else b[d:]).split(d, dim=2)
        q = q.reshape(n, t, h, d // h).transpose(1, 2)
        k = k.reshape(n, k.shape[1], h, d // h).transpose(1, 2)
        v = v.reshape(n, v.shape[1], h, d // h).transpose(1, 2)
        scores = q @ k.transpose(2, 3) / math.sqrt(d // h)
        if additive_mask is not None:
            scores = scores + additive_mask
        y = scores.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(n, t, d))


class BertLayer(nn.Module):
    """BERT's post-norm encoder layer: attention, add & norm, GELU (erf) feed-forward, add & norm."""

    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(dim, heads)
        self.norm1 = nn.LayerNorm(dim, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(), nn.Linear(ffn, dim))
        self.norm2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x, mask):
        x = self.norm1(x + self.attn(x, mask))
        return self.norm2(x + self.ff(x))


class BertEncoder(nn.Module):
    """A BERT-base-like encoder: token, position and segment embeddings, post-norm layers, a
    padding mask from attention_mask (1 = token, 0 = padding), the pooler's tanh on [CLS]."""

    def __init__(self, vocab=30522, dim=768, layers=12, heads=12, ffn=3072, max_len=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.seg = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(dim, heads, ffn) for _ in range(layers))
        self.pooler = nn.Linear(dim, dim)

    def forward(self, input_ids, attention_mask):
        t = input_ids.shape[1]
        pos = torch.arange(t, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tok(input_ids) + self.pos(pos) + self.seg(torch.zeros_like(input_ids)))
        mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return torch.tanh(self.pooler(x[:, 0]))


def gelu_tanh(x):
    # GPT-2's GELU, as its source writes it (not nn.GELU: the exporter keeps the arithmetic).
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class GptBlock(nn.Module):
    """GPT-2's pre-norm block: causal attention masked through masked_fill (Where), tanh GELU."""

    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x, causal):
        n, t, d = x.shape
        h = self.attn.heads
        q, k, v = self.attn.qkv(self.norm1(x)).split(d, dim=2)
        q = q.reshape(n, t, h, d // h).transpose(1, 2)
        k = k.reshape(n, t, h, d // h).transpose(1, 2)
        v = v.reshape(n, t, h, d // h).transpose(1, 2)
        scores = q @ k.transpose(2, 3) / math.sqrt(d // h)
        scores = scores.masked_fill(causal[:, :, :t, :t] == 0, float("-inf"))
        y = scores.softmax(dim=-1) @ v
        x = x + self.attn.proj(y.transpose(1, 2).reshape(n, t, d))
        return x + self.out(gelu_tanh(self.fc(self.norm2(x))))


class GptDecoder(nn.Module):
    """A GPT-2-like causal decoder: the logits of every position, the LM head tied to the token
    embedding (a MatMul against its transpose)."""

    def __init__(self, vocab=50257, dim=768, layers=12, heads=12, max_len=1024):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(GptBlock(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len)).view(
            1, 1, max_len, max_len))

    def forward(self, input_ids):
        t = input_ids.shape[1]
        pos = torch.arange(t, device=input_ids.device).unsqueeze(0)
        x = self.tok(input_ids) + self.pos(pos)
        for b in self.blocks:
            x = b(x, self.causal)
        return self.norm(x) @ self.tok.weight.t()


class DecoderLayer(nn.Module):
    """A pre-norm transformer decoder layer: causal self-attention, cross-attention, ReLU FFN."""

    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.self_attn = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.cross = SelfAttention(dim, heads)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ffn), nn.ReLU(), nn.Linear(ffn, dim))

    def forward(self, y, memory, causal):
        y = y + self.self_attn(self.norm1(y), causal)
        y = y + self.cross(self.norm2(y), None, memory)
        return y + self.ff(self.norm3(y))


class EncoderLayer(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ffn), nn.ReLU(), nn.Linear(ffn, dim))

    def forward(self, x, mask=None):
        x = x + self.attn(self.norm1(x), mask)
        return x + self.ff(self.norm2(x))


def sinusoid(max_len, dim):
    pos = torch.arange(max_len).float()[:, None]
    freq = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(10000.0) / dim))
    pe = torch.zeros(max_len, dim)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class EncoderDecoder(nn.Module):
    """A translation-style encoder-decoder (the Transformer base's shape, smaller by default):
    source and target token ids, sinusoidal positions, a causal target mask made in the graph
    (triu of a constant), the next-token logits of every target position."""

    def __init__(self, vocab=8000, dim=256, layers=3, heads=4, ffn=1024, max_len=256):
        super().__init__()
        self.src_emb = nn.Embedding(vocab, dim)
        self.tgt_emb = nn.Embedding(vocab, dim)
        self.register_buffer("pe", sinusoid(max_len, dim))
        self.enc = nn.ModuleList(EncoderLayer(dim, heads, ffn) for _ in range(layers))
        self.dec = nn.ModuleList(DecoderLayer(dim, heads, ffn) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.scale = math.sqrt(dim)

    def forward(self, src_ids, tgt_ids):
        s, t = src_ids.shape[1], tgt_ids.shape[1]
        x = self.src_emb(src_ids) * self.scale + self.pe[:s]
        for layer in self.enc:
            x = layer(x)
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        y = self.tgt_emb(tgt_ids) * self.scale + self.pe[:t]
        for layer in self.dec:
            y = layer(y, x, causal)
        return self.head(self.norm(y))


class SpeechEncoder(nn.Module):
    """A speech front end in Whisper's shape: log-mel frames [N, mels, T] through two 1-D
    convolutions (the second of stride 2) with GELU, sinusoidal positions, pre-norm transformer
    layers, and a per-frame classifier (a CTC-style head)."""

    def __init__(self, mels=80, dim=384, layers=4, heads=6, classes=32, max_len=1500):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.register_buffer("pe", sinusoid(max_len, dim))
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, 4 * dim) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = nn.functional.gelu(self.conv2(nn.functional.gelu(self.conv1(x))))
        x = x.transpose(1, 2)
        x = x + self.pe[:x.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)).log_softmax(dim=-1)


class WaveformFeatures(nn.Module):
    """wav2vec 2.0's feature encoder on raw audio [N, 1, samples]: seven 1-D convolutions (kernel
    10 stride 5, then 3/2 and 2/2), the first followed by GroupNorm with a group per channel (it
    exports as InstanceNormalization between reshapes), GELU; then a projection of every frame."""

    def __init__(self, dim=512, out=256):
        super().__init__()
        specs = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2
        convs, c = [], 1
        for i, (k, s) in enumerate(specs):
            convs.append(nn.Conv1d(c, dim, k, stride=s, bias=False))
            if i == 0:
                convs.append(nn.GroupNorm(dim, dim))
            convs.append(nn.GELU())
            c = dim
        self.convs = nn.Sequential(*convs)
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, out)

    def forward(self, x):
        return self.proj(self.norm(self.convs(x).transpose(1, 2)))


class AudioCnn(nn.Module):
    """M5 (Dai et al. 2017), the 1-D convolutional audio classifier: raw audio [N, 1, samples],
    a wide first kernel of stride 4, BatchNorm1d, ReLU, MaxPool1d, global average pooling."""

    def __init__(self, classes=35, width=128):
        super().__init__()
        layers, c = [], 1
        for i, (k, s, w) in enumerate([(80, 4, width), (3, 1, width), (3, 1, 2 * width),
                                       (3, 1, 4 * width)]):
            layers += [nn.Conv1d(c, w, k, stride=s), nn.BatchNorm1d(w), nn.ReLU(), nn.MaxPool1d(4)]
            c = w
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(self.features(x).mean(dim=2))


class Tcn(nn.Module):
    """A WaveNet-style temporal convolutional network: causal dilated 1-D convolutions (dilations
    1..2^k, left padding), gated tanh x sigmoid units, residual and skip 1x1 convolutions."""

    def __init__(self, channels=64, skip=128, dilations=(1, 2, 4, 8, 16, 32, 64, 128), out=256):
        super().__init__()
        self.inp = nn.Conv1d(1, channels, 1)
        self.dil = nn.ModuleList(nn.Conv1d(channels, 2 * channels, 2, dilation=d)
                                 for d in dilations)
        self.res = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in dilations)
        self.skip = nn.ModuleList(nn.Conv1d(channels, skip, 1) for _ in dilations)
        self.dilations = dilations
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(),
                                 nn.Conv1d(skip, out, 1))

    def forward(self, x):
        x = self.inp(x)
        skips = 0
        for d, dil, res, skip in zip(self.dilations, self.dil, self.res, self.skip):
            a, b = dil(nn.functional.pad(x, (d, 0))).chunk(2, dim=1)
            z = torch.tanh(a) * torch.sigmoid(b)
            x = x + res(z)
            skips = skips + skip(z)
        return self.out(skips)


class RnnClassifier(nn.Module):
    """A recurrent text classifier: embedding, a two-layer (bidirectional) GRU or LSTM over the
    tokens, the last layer's final states of both directions into a linear layer."""

    def __init__(self, cell="lstm", vocab=20000, emb=128, hidden=256, layers=2,
                 bidirectional=True, classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(emb, hidden, num_layers=layers, bidirectional=bidirectional,
                       batch_first=True)
        self.dirs = 2 if bidirectional else 1
        self.fc = nn.Linear(hidden * self.dirs, classes)

    def forward(self, input_ids):
        out, state = self.rnn(self.emb(input_ids))
        h = state[0] if isinstance(state, tuple) else state
        last = torch.cat([h[-1 - i] for i in range(self.dirs)], dim=1)
        return self.fc(last)


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """The UNet of Ronneberger et al. (padded convolutions, batch norm): max-pooling down,
    transposed convolutions (or bilinear upsampling) up, skip connections by concatenation."""

    def __init__(self, cin=3, classes=2, base=32, depth=4, bilinear=False):
        super().__init__()
        widths = [base * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList([conv_block(cin, widths[0])] +
                                  [conv_block(widths[i], widths[i + 1]) for i in range(depth)])
        self.ups = nn.ModuleList()
        self.up_convs = nn.ModuleList()
        for i in reversed(range(depth)):
            if bilinear:
                self.ups.append(nn.Sequential(
                    nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                    nn.Conv2d(widths[i + 1], widths[i], 1)))
            else:
                self.ups.append(nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2))
            self.up_convs.append(conv_block(2 * widths[i], widths[i]))
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else nn.functional.max_pool2d(x, 2))
            skips.append(x)
        skips.pop()
        for up, conv in zip(self.ups, self.up_convs):
            x = conv(torch.cat([skips.pop(), up(x)], dim=1))
        return self.head(x)


class DcganGenerator(nn.Module):
    """DCGAN's generator (Radford et al.): a latent [N, nz, 1, 1] through transposed convolutions
    with batch norm and ReLU to a tanh image of size 4 * 2^ups."""

    def __init__(self, nz=100, ngf=64, ups=4, channels=3):
        super().__init__()
        w = ngf * 2 ** (ups - 1)
        layers = [nn.ConvTranspose2d(nz, w, 4, 1, 0, bias=False), nn.BatchNorm2d(w), nn.ReLU(True)]
        for _ in range(ups - 1):
            layers += [nn.ConvTranspose2d(w, w // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(w // 2),
                       nn.ReLU(True)]
            w //= 2
        layers += [nn.ConvTranspose2d(w, channels, 4, 2, 1, bias=False), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, z):
        return self.net(z)


class Conv3dNet(nn.Module):
    """A C3D-style video classifier: 3x3x3 convolutions with batch norm, MaxPool3d (the first
    spatial only) and AvgPool3d, a dilated 3-D convolution, global pooling and a linear head."""

    def __init__(self, classes=10, width=32):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv3d(3, w, 3, padding=1), nn.BatchNorm3d(w), nn.ReLU(),
            nn.MaxPool3d((1, 2, 2)),
            nn.Conv3d(w, 2 * w, 3, padding=1), nn.BatchNorm3d(2 * w), nn.ReLU(),
            nn.MaxPool3d(2, ceil_mode=True),
            nn.Conv3d(2 * w, 2 * w, 3, padding=2, dilation=2), nn.ReLU(),
            nn.AvgPool3d(2, ceil_mode=True, count_include_pad=False),
            nn.Conv3d(2 * w, 4 * w, (1, 3, 3), padding=(0, 1, 1)), nn.ReLU())
        self.fc = nn.Linear(4 * w, classes)

    def forward(self, x):
        return self.fc(nn.functional.adaptive_avg_pool3d(self.features(x), 1).flatten(1))
