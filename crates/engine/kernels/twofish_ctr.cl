/* warpfs mask kernel for Twofish-128/256 (FORMAT.md 11): the counter mode
 * of kernels/aes_ctr.cl with Twofish as the block cipher. The counter
 * block is nonce(12) || u32 big-endian counter (wrapping mod 2^32), read
 * by Twofish as four little-endian words; the host prepends
 * kernels/twofish_round.cl (macros and the round function).
 *
 * The arguments and the descriptor layout are aes_ctr.cl's, so one launch
 * path serves both:
 *   te    : unused (the AES kernel's table)
 *   keys  : TF_WORDS words per key (its four MDS-folded S-box tables, then
 *           its 40 subkeys: warpfs_crypto::twofish::Twofish::device_words)
 *   desc  : DESC_WORDS words per context: nonce words 0..2 (big-endian),
 *           first counter, block count, output offset (blocks),
 *           key index << 8 | 16, first work item
 *   ndesc : number of contexts; total: work items that have work
 *   out   : the masks, 16 bytes per block, at each context's offset
 * Work item g makes BPW consecutive counter blocks of the context whose
 * first work item is the largest one <= g (binary search over desc). The
 * work group copies the tables and subkeys of its first work item's key to
 * local/shared memory (4 KiB); a work item whose context has another key
 * (a group spanning contexts of several keys) reads that key from global
 * memory. The work-group size must be 256. Little-endian devices only. */

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define BSWAP(x) __byte_perm((x), 0, 0x0123)
#else
#define BSWAP(x) ((((x) & 0xffu) << 24) | (((x) & 0xff00u) << 8) | (((x) >> 8) & 0xff00u) | ((x) >> 24))
#endif

#define DESC_WORDS 8
#define BPW 4

/* The context of work item `x`: the last descriptor whose first work item
 * is <= x (into `at`). A macro like the round function (see twofish_round.cl). */
#define FIND_CTX(desc, ndesc, x, at)                                                               \
    do {                                                                                           \
        uint lo_ = 0, hi_ = (ndesc) - 1;                                                           \
        while (lo_ < hi_) {                                                                        \
            uint mid_ = (lo_ + hi_ + 1) >> 1;                                                      \
            if ((desc)[mid_ * DESC_WORDS + 7] <= (x)) {                                            \
                lo_ = mid_;                                                                        \
            } else {                                                                               \
                hi_ = mid_ - 1;                                                                    \
            }                                                                                      \
        }                                                                                          \
        (at) = lo_;                                                                                \
    } while (0)

KERNEL void warpfs_twofish_ctr(GLOBAL const uint *te_unused, GLOBAL const uint *keys, GLOBAL const uint *desc,
                               uint ndesc, uint total, GLOBAL uint *out) {
    LOCAL uint s[1024];
    LOCAL uint k[40];
    uint l = LID;
    uint g = GID;
    uint gk = 0;
    if (ndesc != 0) {
        uint c0;
        FIND_CTX(desc, ndesc, g - l, c0);
        gk = desc[c0 * DESC_WORDS + 6] >> 8;
    }
    GLOBAL const uint *gkey = keys + (size_t)gk * TF_WORDS;
    for (uint i = l; i < 1024u; i += 256u) {
        s[i] = gkey[i];
    }
    if (l < 40u) {
        k[l] = gkey[1024 + l];
    }
    BARRIER;
    if (g >= total || ndesc == 0) {
        return;
    }
    /* Named apart from TF_ENC's own a, b, c, d. */
    uint ci;
    FIND_CTX(desc, ndesc, g, ci);
    GLOBAL const uint *dp = desc + ci * DESC_WORDS;
    uint n0 = BSWAP(dp[0]), n1 = BSWAP(dp[1]), n2 = BSWAP(dp[2]), ctr = dp[3], nblk = dp[4], off = dp[5];
    uint ki = dp[6] >> 8;
    GLOBAL const uint *key = keys + (size_t)ki * TF_WORDS;
    uint first = (g - dp[7]) * BPW;
    for (uint j = 0; j < BPW; j++) {
        uint blk = first + j;
        if (blk >= nblk) {
            break;
        }
        uint4 v = MK4(n0, n1, n2, BSWAP(ctr + blk));
        if (ki == gk) {
            TF_ENC(s, k, v);
        } else {
            TF_ENC(key, key + 1024, v);
        }
        GLOBAL uint *o = out + (size_t)(off + blk) * 4;
        o[0] = v.x;
        o[1] = v.y;
        o[2] = v.z;
        o[3] = v.w;
    }
}
