/* warpfs GPU XTS kernel: XTS-AES-128/256 (IEEE 1619) over whole data
 * units of full 16-byte blocks, encrypt and decrypt, in place. One source
 * for OpenCL C and CUDA C (NVRTC), like kernels/aes_ctr.cl.
 *
 * The single fused kernel of the TrueCrypt GPU XTS paper (Algorithm IV.2):
 * no separate launch computes the encrypted data-unit numbers; every work
 * item recomputes its unit's tweak E_K2(n) itself, multiplies it by alpha^i
 * for its first block i, and then processes BPW consecutive blocks of that
 * unit (doubling the tweak between blocks).
 *
 * The host passes:
 *   tab   : 768 words: Te0 (256), Td0 (256), the inverse S-box (256, one
 *           byte per word); copied to local/shared memory (Te1..3 and
 *           Td1..3 are rotations; the S-box is byte 1 of Te0)
 *   keys  : 120 words: the data key's round keys (encryption schedule, or
 *           the equivalent-inverse-cipher decryption schedule) at 0, the
 *           tweak key's encryption schedule at 60 (big-endian words)
 *   rounds: 10 or 14
 *   ublk  : blocks per data unit; units: data units in this launch
 *   f0..f3: number of the launch's first unit, a 128-bit little-endian
 *           integer as four 32-bit limbs (least significant first)
 *   b0..b3: base tweak (raw little-endian words of its 16 bytes); the
 *           tweak input of unit n is base XOR n (IEEE 1619: base = 0)
 *   dec   : 0 encrypt, 1 decrypt
 *   data  : the units, ublk * 16 bytes each, rewritten in place
 * The work-group size must be 256 (one table entry per work item).
 * Little-endian devices only (every OpenCL GPU/CPU we target, NVIDIA). */

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
#define BSWAP(x) __byte_perm((x), 0, 0x0123)
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
#define BSWAP(x) ((((x) & 0xffu) << 24) | (((x) & 0xff00u) << 8) | (((x) >> 8) & 0xff00u) | ((x) >> 24))
#define MK4(a, b, c, d) ((uint4)((a), (b), (c), (d)))
#endif

#define RK_WORDS 60
#define BPW 4

#define B0(x) ((x) >> 24)
#define B1(x) (((x) >> 16) & 0xffu)
#define B2(x) (((x) >> 8) & 0xffu)
#define B3(x) ((x) & 0xffu)
#define E0(x) (te[B0(x)])
#define E1(x) ROTR(te[B1(x)], 8)
#define E2(x) ROTR(te[B2(x)], 16)
#define E3(x) ROTR(te[B3(x)], 24)
#define SB(x) ((te[(x)] >> 8) & 0xffu)
#define D0(x) (td[B0(x)])
#define D1(x) ROTR(td[B1(x)], 8)
#define D2(x) ROTR(td[B2(x)], 16)
#define D3(x) ROTR(td[B3(x)], 24)
#define IS(x) (isb[(x)])

/* AES on a uint4 `v` of big-endian state words, in place, inside the
 * kernel. Macros, not functions: helper functions that read the tables
 * through __local pointer parameters read zeros on pocl here (observed:
 * AES of zero gave only the last round key), so the code is expanded.
 * AES_ENC uses te; AES_DEC (equivalent inverse cipher, decryption
 * schedule) uses td and isb. */
#define AES_ENC(rk, rounds, v)                                                                     \
    do {                                                                                           \
        uint s0 = (v).x ^ (rk)[0], s1 = (v).y ^ (rk)[1], s2 = (v).z ^ (rk)[2], s3 = (v).w ^ (rk)[3]; \
        for (uint r = 1; r < (rounds); r++) {                                                      \
            GLOBAL const uint *k = (rk) + 4 * r;                                                   \
            uint t0 = E0(s0) ^ E1(s1) ^ E2(s2) ^ E3(s3) ^ k[0];                                    \
            uint t1 = E0(s1) ^ E1(s2) ^ E2(s3) ^ E3(s0) ^ k[1];                                    \
            uint t2 = E0(s2) ^ E1(s3) ^ E2(s0) ^ E3(s1) ^ k[2];                                    \
            uint t3 = E0(s3) ^ E1(s0) ^ E2(s1) ^ E3(s2) ^ k[3];                                    \
            s0 = t0;                                                                               \
            s1 = t1;                                                                               \
            s2 = t2;                                                                               \
            s3 = t3;                                                                               \
        }                                                                                          \
        GLOBAL const uint *k = (rk) + 4 * (rounds);                                                \
        (v) = MK4((SB(B0(s0)) << 24) ^ (SB(B1(s1)) << 16) ^ (SB(B2(s2)) << 8) ^ SB(B3(s3)) ^ k[0],   \
                  (SB(B0(s1)) << 24) ^ (SB(B1(s2)) << 16) ^ (SB(B2(s3)) << 8) ^ SB(B3(s0)) ^ k[1],   \
                  (SB(B0(s2)) << 24) ^ (SB(B1(s3)) << 16) ^ (SB(B2(s0)) << 8) ^ SB(B3(s1)) ^ k[2],   \
                  (SB(B0(s3)) << 24) ^ (SB(B1(s0)) << 16) ^ (SB(B2(s1)) << 8) ^ SB(B3(s2)) ^ k[3]);  \
    } while (0)

#define AES_DEC(rk, rounds, v)                                                                     \
    do {                                                                                           \
        uint s0 = (v).x ^ (rk)[0], s1 = (v).y ^ (rk)[1], s2 = (v).z ^ (rk)[2], s3 = (v).w ^ (rk)[3]; \
        for (uint r = 1; r < (rounds); r++) {                                                      \
            GLOBAL const uint *k = (rk) + 4 * r;                                                   \
            uint t0 = D0(s0) ^ D1(s3) ^ D2(s2) ^ D3(s1) ^ k[0];                                    \
            uint t1 = D0(s1) ^ D1(s0) ^ D2(s3) ^ D3(s2) ^ k[1];                                    \
            uint t2 = D0(s2) ^ D1(s1) ^ D2(s0) ^ D3(s3) ^ k[2];                                    \
            uint t3 = D0(s3) ^ D1(s2) ^ D2(s1) ^ D3(s0) ^ k[3];                                    \
            s0 = t0;                                                                               \
            s1 = t1;                                                                               \
            s2 = t2;                                                                               \
            s3 = t3;                                                                               \
        }                                                                                          \
        GLOBAL const uint *k = (rk) + 4 * (rounds);                                                \
        (v) = MK4((IS(B0(s0)) << 24) ^ (IS(B1(s3)) << 16) ^ (IS(B2(s2)) << 8) ^ IS(B3(s1)) ^ k[0],   \
                  (IS(B0(s1)) << 24) ^ (IS(B1(s0)) << 16) ^ (IS(B2(s3)) << 8) ^ IS(B3(s2)) ^ k[1],   \
                  (IS(B0(s2)) << 24) ^ (IS(B1(s1)) << 16) ^ (IS(B2(s0)) << 8) ^ IS(B3(s3)) ^ k[2],   \
                  (IS(B0(s3)) << 24) ^ (IS(B1(s2)) << 16) ^ (IS(B2(s1)) << 8) ^ IS(B3(s0)) ^ k[3]);  \
    } while (0)

/* Multiply a tweak (raw little-endian words: a 128-bit little-endian
 * polynomial) by alpha in GF(2^128) mod x^128 + x^7 + x^2 + x + 1. */
DEVFN uint4 xts_double(uint4 t) {
    return MK4((t.x << 1) ^ ((t.w >> 31) * 0x87u), (t.y << 1) | (t.x >> 31), (t.z << 1) | (t.y >> 31),
               (t.w << 1) | (t.z >> 31));
}

DEVFN uint4 bswap4(uint4 v) {
    return MK4(BSWAP(v.x), BSWAP(v.y), BSWAP(v.z), BSWAP(v.w));
}

KERNEL void warpfs_aes_xts(GLOBAL const uint *tab, GLOBAL const uint *keys, uint rounds, uint ublk, uint units,
                           uint f0, uint f1, uint f2, uint f3, uint b0, uint b1, uint b2, uint b3, uint dec,
                           GLOBAL uint *data) {
    LOCAL uint te[256];
    LOCAL uint td[256];
    LOCAL uint isb[256];
    uint l = LID;
    te[l] = tab[l];
    td[l] = tab[256 + l];
    isb[l] = tab[512 + l];
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
    uint4 t = bswap4(MK4(n0 ^ b0, n1 ^ b1, n2 ^ b2, n3 ^ b3));
    AES_ENC(keys + RK_WORDS, rounds, t);
    t = bswap4(t);
    for (uint i = 0; i < first; i++) {
        t = xts_double(t);
    }
    GLOBAL uint *p = data + ((size_t)u * ublk + first) * 4;
    for (uint j = 0; j < BPW && first + j < ublk; j++) {
        uint4 s = bswap4(MK4(p[0] ^ t.x, p[1] ^ t.y, p[2] ^ t.z, p[3] ^ t.w));
        if (dec) {
            AES_DEC(keys, rounds, s);
        } else {
            AES_ENC(keys, rounds, s);
        }
        s = bswap4(s);
        p[0] = s.x ^ t.x;
        p[1] = s.y ^ t.y;
        p[2] = s.z ^ t.z;
        p[3] = s.w ^ t.w;
        p += 4;
        t = xts_double(t);
    }
}
