/* warpfs GPU XTS kernel: XTS-Twofish-128/256 (IEEE 1619 over Twofish, as
 * TrueCrypt offers it) over whole data units of full 16-byte blocks,
 * encrypt and decrypt, in place. One source for OpenCL C and CUDA C
 * (NVRTC), like kernels/aes_xts.cl, whose layout and arguments it follows;
 * the host prepends kernels/twofish_round.cl (macros and the round function).
 *
 * The single fused kernel of the TrueCrypt GPU XTS paper (Algorithm IV.2):
 * every work item recomputes its unit's tweak E_K2(n) itself, multiplies it
 * by alpha^i for its first block i, then processes BPW consecutive blocks
 * of that unit (doubling the tweak between blocks). Twofish with full
 * keying: g(X) is four lookups in the key's MDS-folded S-box tables, which
 * the work group copies to local/shared memory first (both keys: 8 KiB).
 *
 * The host passes:
 *   keys  : 2128 words: the data key K1 (its four 256-word tables, then its
 *           40 subkeys), then the tweak key K2 the same way
 *           (warpfs_crypto::twofish::Twofish::device_words)
 *   ublk  : blocks per data unit; units: data units in this launch
 *   f0..f3: number of the launch's first unit, a 128-bit little-endian
 *           integer as four 32-bit limbs (least significant first)
 *   b0..b3: base tweak (raw little-endian words of its 16 bytes); the
 *           tweak input of unit n is base XOR n (IEEE 1619: base = 0)
 *   dec   : 0 encrypt, 1 decrypt
 *   data  : the units, ublk * 16 bytes each, rewritten in place
 * The work-group size must be 256. Twofish reads blocks as little-endian
 * words: little-endian devices only (every OpenCL GPU/CPU we target, NVIDIA). */

#define BPW 4

/* Multiply a tweak (raw little-endian words: a 128-bit little-endian
 * polynomial) by alpha in GF(2^128) mod x^128 + x^7 + x^2 + x + 1. */
DEVFN uint4 xts_double(uint4 t) {
    return MK4((t.x << 1) ^ ((t.w >> 31) * 0x87u), (t.y << 1) | (t.x >> 31), (t.z << 1) | (t.y >> 31),
               (t.w << 1) | (t.z >> 31));
}

KERNEL void warpfs_twofish_xts(GLOBAL const uint *keys, uint ublk, uint units, uint f0, uint f1, uint f2,
                               uint f3, uint b0, uint b1, uint b2, uint b3, uint dec, GLOBAL uint *data) {
    LOCAL uint s1[1024];
    LOCAL uint s2[1024];
    LOCAL uint k1[40];
    LOCAL uint k2[40];
    uint l = LID;
    for (uint i = l; i < 1024u; i += 256u) {
        s1[i] = keys[i];
        s2[i] = keys[TF_WORDS + i];
    }
    if (l < 40u) {
        k1[l] = keys[1024 + l];
        k2[l] = keys[TF_WORDS + 1024 + l];
    }
    BARRIER;
    uint per_unit = (ublk + BPW - 1) / BPW;
    uint g = GID;
    if (ublk == 0 || g >= units * per_unit) {
        return;
    }
    uint u = g / per_unit;
    uint first = (g % per_unit) * BPW;
    /* n = first unit + u, 128-bit little-endian add with carry. */
    uint n0 = f0 + u;
    uint c = n0 < u ? 1u : 0u;
    uint n1 = f1 + c;
    c = (c != 0u && n1 == 0u) ? 1u : 0u;
    uint n2 = f2 + c;
    c = (c != 0u && n2 == 0u) ? 1u : 0u;
    uint n3 = f3 + c;
    /* Tweak: E_K2(base XOR n), then times alpha^first. */
    uint4 t = MK4(n0 ^ b0, n1 ^ b1, n2 ^ b2, n3 ^ b3);
    TF_ENC(s2, k2, t);
    for (uint i = 0; i < first; i++) {
        t = xts_double(t);
    }
    GLOBAL uint *p = data + ((size_t)u * ublk + first) * 4;
    for (uint j = 0; j < BPW && first + j < ublk; j++) {
        uint4 s = MK4(p[0] ^ t.x, p[1] ^ t.y, p[2] ^ t.z, p[3] ^ t.w);
        if (dec) {
            TF_DEC(s1, k1, s);
        } else {
            TF_ENC(s1, k1, s);
        }
        p[0] = s.x ^ t.x;
        p[1] = s.y ^ t.y;
        p[2] = s.z ^ t.z;
        p[3] = s.w ^ t.w;
        p += 4;
        t = xts_double(t);
    }
}
