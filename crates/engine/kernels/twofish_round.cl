/* warpfs Twofish round function for the device kernels, prepended by the
 * host to kernels/twofish_xts.cl (XTS) and kernels/twofish_ctr.cl (mask
 * keystream): portability macros for OpenCL C and CUDA C (NVRTC), the
 * g function over a key's four MDS-folded S-box tables (full keying,
 * warpfs_crypto::twofish::Twofish::device_words: 1024 table words, then
 * the 40 subkeys = TF_WORDS per key) and Twofish encryption/decryption of
 * one block held as four little-endian words. */

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
