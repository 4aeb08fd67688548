/* warpfs GPU XTS kernel: XTS-Twofish-128/256 (IEEE 1619 over Twofish, as
 * TrueCrypt offers it) over whole data units of full 16-byte blocks,
 * encrypt and decrypt, in place. One source for OpenCL C and CUDA C
 * (NVRTC), like kernels/aes_xts.cl, whose layout and arguments it follows.
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

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define KERNEL extern "C" __global__
#define GLOBAL
#define LOCAL __shared__
#define DEVFN __device__ static inline
#define GID (blockIdx.x * blockDim.x + threadIdx.x)
#define LID (threadIdx.x)
#define BARRIER __syncthreads()
typedef unsigned int uint;
#define ROTR(x, n) __funnelshift_r((x), (x), (n))
#define ROTL(x, n) __funnelshift_l((x), (x), (n))
#define MK4(a, b, c, d) make_uint4((a), (b), (c), (d))
#else
#define KERNEL __kernel
#define GLOBAL __global
#define LOCAL __local
#define DEVFN static inline
#define GID ((uint)get_global_id(0))
#define LID ((uint)get_local_id(0))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define ROTR(x, n) rotate((uint)(x), (uint)(32 - (n)))
#define ROTL(x, n) rotate((uint)(x), (uint)(n))
#define MK4(a, b, c, d) ((uint4)((a), (b), (c), (d)))
#endif

#define TF_WORDS 1064
#define BPW 4

/* g(x) and g(ROL(x, 8)) over the tables `s` (1024 words). Macros, not
 * functions: helper functions reading __local pointer parameters read
 * zeros on pocl (see kernels/aes_xts.cl). */
#define G0(s, x) ((s)[(x) & 0xffu] ^ (s)[256 + (((x) >> 8) & 0xffu)] ^ (s)[512 + (((x) >> 16) & 0xffu)] ^ (s)[768 + ((x) >> 24)])
#define G1(s, x) ((s)[(x) >> 24] ^ (s)[256 + ((x) & 0xffu)] ^ (s)[512 + (((x) >> 8) & 0xffu)] ^ (s)[768 + (((x) >> 16) & 0xffu)])

/* Twofish of the uint4 `v` (little-endian words) in place, tables `s`,
 * subkeys `k`; two rounds per step, halves swapped by naming. */
#define TF_ENC(s, k, v)                                                                            \
    do {                                                                                           \
        uint a = (v).x ^ (k)[0], b = (v).y ^ (k)[1], c = (v).z ^ (k)[2], d = (v).w ^ (k)[3];       \
        for (uint r = 0; r < 8; r++) {                                                             \
            uint t0 = G0(s, a), t1 = G1(s, b);                                                     \
            c = ROTR(c ^ (t0 + t1 + (k)[8 + 4 * r]), 1);                                           \
            d = ROTL(d, 1) ^ (t0 + 2u * t1 + (k)[9 + 4 * r]);                                      \
            t0 = G0(s, c);                                                                         \
            t1 = G1(s, d);                                                                         \
            a = ROTR(a ^ (t0 + t1 + (k)[10 + 4 * r]), 1);                                          \
            b = ROTL(b, 1) ^ (t0 + 2u * t1 + (k)[11 + 4 * r]);                                     \
        }                                                                                          \
        (v) = MK4(c ^ (k)[4], d ^ (k)[5], a ^ (k)[6], b ^ (k)[7]);                                 \
    } while (0)

#define TF_DEC(s, k, v)                                                                            \
    do {                                                                                           \
        uint c = (v).x ^ (k)[4], d = (v).y ^ (k)[5], a = (v).z ^ (k)[6], b = (v).w ^ (k)[7];       \
        for (int r = 7; r >= 0; r--) {                                                             \
            uint t0 = G0(s, c), t1 = G1(s, d);                                                     \
            a = ROTL(a, 1) ^ (t0 + t1 + (k)[10 + 4 * r]);                                          \
            b = ROTR(b ^ (t0 + 2u * t1 + (k)[11 + 4 * r]), 1);                                     \
            t0 = G0(s, a);                                                                         \
            t1 = G1(s, b);                                                                         \
            c = ROTL(c, 1) ^ (t0 + t1 + (k)[8 + 4 * r]);                                           \
            d = ROTR(d ^ (t0 + 2u * t1 + (k)[9 + 4 * r]), 1);                                      \
        }                                                                                          \
        (v) = MK4(a ^ (k)[0], b ^ (k)[1], c ^ (k)[2], d ^ (k)[3]);                                 \
    } while (0)

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
