/* bench/twofish/gcry.c: libgcrypt's Twofish (and AES) over 4 KiB units,
 * one thread, for bench/twofish.sh; and a Twofish-GCM known answer.
 *
 *   gcry bench SECS      one JSON line per (cipher, mode): MB/s (10^6 B/s)
 *                        by wall clock and by thread CPU time
 *   gcry kat             Twofish-256-GCM of a fixed key/nonce/AAD/plaintext
 *
 * XTS: a fresh tweak (unit number, little-endian) per 4 KiB unit; CTR: a
 * fresh counter block nonce(12) || BE32(2) per unit, as warpfs uses them. */
#include <gcrypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNIT 4096
#define BUF (16u << 20)

static double now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what, gcry_error_t e) {
    fprintf(stderr, "%s: %s\n", what, gcry_strerror(e));
    exit(1);
}

static void run(const char *name, int algo, int mode, size_t keylen, double secs, unsigned char *buf) {
    gcry_cipher_hd_t h;
    gcry_error_t e = gcry_cipher_open(&h, algo, mode, 0);
    if (e) die("open", e);
    unsigned char key[64];
    for (size_t i = 0; i < sizeof key; i++) key[i] = (unsigned char)(i * 7 + 1);
    if ((e = gcry_cipher_setkey(h, key, keylen))) die("setkey", e);
    unsigned long long bytes = 0, unit = 0;
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID), w1;
    do {
        for (size_t off = 0; off < BUF; off += UNIT, unit++) {
            unsigned char iv[16] = {0};
            if (mode == GCRY_CIPHER_MODE_XTS) {
                memcpy(iv, &unit, 8);
                if ((e = gcry_cipher_setiv(h, iv, 16))) die("setiv", e);
            } else {
                memcpy(iv, &unit, 8);
                iv[15] = 2;
                if ((e = gcry_cipher_setctr(h, iv, 16))) die("setctr", e);
            }
            if ((e = gcry_cipher_encrypt(h, buf + off, UNIT, NULL, 0))) die("encrypt", e);
        }
        bytes += BUF;
        w1 = now(CLOCK_MONOTONIC);
    } while (w1 - w0 < secs);
    double c1 = now(CLOCK_THREAD_CPUTIME_ID);
    printf("{\"impl\":\"libgcrypt %s\",\"cipher\":\"%s\",\"wall_mbps\":%.1f,\"cpu_mbps\":%.1f}\n",
           gcry_check_version(NULL), name, bytes / (w1 - w0) / 1e6, bytes / (c1 - c0) / 1e6);
    gcry_cipher_close(h);
}

static void hex(const char *label, const unsigned char *p, size_t n) {
    printf("%s", label);
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (!gcry_check_version(GCRYPT_VERSION)) return 1;
    gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    if (argc >= 2 && !strcmp(argv[1], "kat")) {
        unsigned char key[32], nonce[12], aad[24], pt[80], tag[16];
        for (int i = 0; i < 32; i++) key[i] = (unsigned char)i;
        for (int i = 0; i < 12; i++) nonce[i] = (unsigned char)(0xa0 + i);
        for (int i = 0; i < 24; i++) aad[i] = (unsigned char)(0x30 + i);
        for (int i = 0; i < 80; i++) pt[i] = (unsigned char)(i * 3);
        for (int klen = 16; klen <= 32; klen += 16) {
            gcry_cipher_hd_t h;
            gcry_error_t e = gcry_cipher_open(&h, klen == 16 ? GCRY_CIPHER_TWOFISH128 : GCRY_CIPHER_TWOFISH,
                                              GCRY_CIPHER_MODE_GCM, 0);
            if (e) die("open", e);
            unsigned char buf[80];
            memcpy(buf, pt, 80);
            if ((e = gcry_cipher_setkey(h, key, klen)) || (e = gcry_cipher_setiv(h, nonce, 12)) ||
                (e = gcry_cipher_authenticate(h, aad, 24)) || (e = gcry_cipher_encrypt(h, buf, 80, NULL, 0)) ||
                (e = gcry_cipher_gettag(h, tag, 16)))
                die("gcm", e);
            printf("Twofish-%d-GCM\n", klen * 8);
            hex("key   ", key, klen);
            hex("nonce ", nonce, 12);
            hex("aad   ", aad, 24);
            hex("pt    ", pt, 80);
            hex("ct    ", buf, 80);
            hex("tag   ", tag, 16);
            gcry_cipher_close(h);
        }
        return 0;
    }
    double secs = argc >= 3 ? atof(argv[2]) : 1.0;
    unsigned char *buf = aligned_alloc(64, BUF);
    memset(buf, 0x5a, BUF);
    run("Twofish-128 XTS", GCRY_CIPHER_TWOFISH128, GCRY_CIPHER_MODE_XTS, 32, secs, buf);
    run("Twofish-256 XTS", GCRY_CIPHER_TWOFISH, GCRY_CIPHER_MODE_XTS, 64, secs, buf);
    run("Twofish-128 CTR", GCRY_CIPHER_TWOFISH128, GCRY_CIPHER_MODE_CTR, 16, secs, buf);
    run("Twofish-256 CTR", GCRY_CIPHER_TWOFISH, GCRY_CIPHER_MODE_CTR, 32, secs, buf);
    run("AES-256 XTS", GCRY_CIPHER_AES256, GCRY_CIPHER_MODE_XTS, 64, secs, buf);
    free(buf);
    return 0;
}
