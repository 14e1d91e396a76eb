/* Written for reblock's copy of nbd-tester-client (not part of the upstream sources):
 * the few definitions upstream's configure script would make on Linux. */
#define NBD_LFS 1
#define HAVE_FDATASYNC 1
#define HAVE_MKSTEMP 1
#define PACKAGE_VERSION "reblock-test"
#ifndef HAVE_GNUTLS
#define HAVE_GNUTLS 0
#endif
