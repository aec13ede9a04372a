/*
 * The clock shim's sockets: the kernel's receive timestamps a program reads, and the
 * timeouts it gives its sockets. See vt.c.
 *
 * Timestamps: SO_TIMESTAMP, SO_TIMESTAMPNS and SO_TIMESTAMPING control messages
 * (old and new layouts) from recvmsg and recvmmsg, and the SIOCGSTAMP / SIOCGSTAMPNS
 * ioctls, carry CLOCK_REALTIME instants taken by the kernel; they are rewritten to
 * the node's virtual realtime, so that ping's RTT (its send time is a virtual
 * gettimeofday in the payload) is virtual. SO_TIMESTAMPING's hardware stamp (the
 * third) is a NIC clock's and is left alone.
 *
 * Timeouts: SO_RCVTIMEO and SO_SNDTIMEO, TCP_USER_TIMEOUT, TCP_KEEPIDLE and
 * TCP_KEEPINTVL are multiplied by the TDF when set and divided when read back. They
 * keep the TDF in force when they were set.
 */
#include "vt_internal.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#ifndef SO_TIMESTAMP_OLD
#define SO_TIMESTAMP_OLD 29
#define SO_TIMESTAMPNS_OLD 35
#define SO_TIMESTAMPING_OLD 37
#endif
#ifndef SO_TIMESTAMP_NEW
#define SO_TIMESTAMP_NEW 63
#define SO_TIMESTAMPNS_NEW 64
#define SO_TIMESTAMPING_NEW 65
#endif
#ifndef SO_RCVTIMEO_OLD
#define SO_RCVTIMEO_OLD 20
#define SO_SNDTIMEO_OLD 21
#endif
#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW 66
#define SO_SNDTIMEO_NEW 67
#endif
#ifndef SIOCGSTAMP_OLD
#define SIOCGSTAMP_OLD 0x8906
#define SIOCGSTAMPNS_OLD 0x8907
#endif

static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static int (*real_recvmmsg)(int, struct mmsghdr *, unsigned, int, struct timespec *);
static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_setsockopt)(int, int, int, const void *, socklen_t);
static int (*real_getsockopt)(int, int, int, void *, socklen_t *);

static void resolve(void)
{
    if (!inited)
        vt_init();
    if (__atomic_load_n(&real_getsockopt, __ATOMIC_ACQUIRE))
        return;
    real_recvmsg = (__typeof__(real_recvmsg))dlsym(RTLD_NEXT, "recvmsg");
    real_recvmmsg = (__typeof__(real_recvmmsg))dlsym(RTLD_NEXT, "recvmmsg");
    real_ioctl = (__typeof__(real_ioctl))dlsym(RTLD_NEXT, "ioctl");
    real_setsockopt = (__typeof__(real_setsockopt))dlsym(RTLD_NEXT, "setsockopt");
    __atomic_store_n(&real_getsockopt,
                     (__typeof__(real_getsockopt))dlsym(RTLD_NEXT, "getsockopt"),
                     __ATOMIC_RELEASE);
}

/* A kernel CLOCK_REALTIME stamp (ns) as the node's virtual realtime. */
static int64_t stamp_virt(const struct vt_view *v, int64_t real)
{
    return real == 0 ? 0 : to_virt(v, FAM_REALTIME, real);
}

/* Two 64-bit words (seconds, then µs or ns): timeval and timespec on 64-bit
 * machines, and the kernel's __kernel_sock_timeval / __kernel_timespec. */
static void rewrite_pair(const struct vt_view *v, unsigned char *p, int64_t unit)
{
    int64_t w[2];
    memcpy(w, p, sizeof w);
    int64_t ns = stamp_virt(v, w[0] * NS + w[1] * unit);
    w[0] = ns / NS;
    w[1] = (ns % NS) / unit;
    memcpy(p, w, sizeof w);
}

static void rewrite_cmsgs(struct msghdr *msg)
{
    struct vt_view v;
    if (!msg || !msg->msg_control || !vt_view(&v))
        return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET)
            continue;
        size_t len = c->cmsg_len - CMSG_LEN(0);
        unsigned char *d = CMSG_DATA(c);
        switch (c->cmsg_type) {
        case SO_TIMESTAMP_OLD:
        case SO_TIMESTAMP_NEW:
            if (len >= 16)
                rewrite_pair(&v, d, 1000);
            break;
        case SO_TIMESTAMPNS_OLD:
        case SO_TIMESTAMPNS_NEW:
            if (len >= 16)
                rewrite_pair(&v, d, 1);
            break;
        case SO_TIMESTAMPING_OLD:
        case SO_TIMESTAMPING_NEW:
            /* [0] software, [1] legacy (zero), [2] hardware: only the first. */
            if (len >= 16)
                rewrite_pair(&v, d, 1);
            break;
        default:
            break;
        }
    }
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    resolve();
    ssize_t r = real_recvmsg(fd, msg, flags);
    if (r >= 0)
        rewrite_cmsgs(msg);
    return r;
}

int recvmmsg(int fd, struct mmsghdr *vec, unsigned n, int flags, struct timespec *tmo)
{
    resolve();
    struct vt_view v;
    struct timespec t;
    if (tmo && vt_view(&v)) { /* a relative timeout, in virtual time */
        t = ns_ts((int64_t)((double)ts_ns(tmo) * v.tdf));
        tmo = &t;
    }
    int r = real_recvmmsg(fd, vec, n, flags, tmo);
    for (int i = 0; i < r; i++)
        rewrite_cmsgs(&vec[i].msg_hdr);
    return r;
}

int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    resolve();
    int r = real_ioctl(fd, req, arg);
    struct vt_view v;
    if (r != 0 || !arg || !vt_view(&v))
        return r;
    if (req == SIOCGSTAMP_OLD || req == SIOCGSTAMP_NEW)
        rewrite_pair(&v, arg, 1000);
    else if (req == SIOCGSTAMPNS_OLD || req == SIOCGSTAMPNS_NEW)
        rewrite_pair(&v, arg, 1);
    return r;
}

/* --- socket timeouts -------------------------------------------------------------- */

static int is_timeval_opt(int level, int name)
{
    return level == SOL_SOCKET && (name == SO_RCVTIMEO_OLD || name == SO_SNDTIMEO_OLD ||
                                   name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW);
}

static int is_tcp_int_opt(int level, int name)
{
    return level == IPPROTO_TCP &&
           (name == TCP_USER_TIMEOUT || name == TCP_KEEPIDLE || name == TCP_KEEPINTVL);
}

static void scale_timeval(unsigned char *p, double f)
{
    int64_t w[2];
    memcpy(w, p, sizeof w);
    int64_t us = (int64_t)((double)(w[0] * 1000000LL + w[1]) * f);
    w[0] = us / 1000000;
    w[1] = us % 1000000;
    memcpy(p, w, sizeof w);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    resolve();
    struct vt_view v;
    if (!val || !vt_view(&v))
        return real_setsockopt(fd, level, name, val, len);
    if (is_timeval_opt(level, name) && len >= 16) {
        unsigned char t[16];
        memcpy(t, val, sizeof t);
        scale_timeval(t, v.tdf);
        return real_setsockopt(fd, level, name, t, sizeof t);
    }
    if (is_tcp_int_opt(level, name) && len >= (socklen_t)sizeof(int)) {
        int x;
        memcpy(&x, val, sizeof x);
        double scaled = (double)x * v.tdf;
        x = scaled > 2147483647.0 ? 2147483647 : (int)(scaled + 0.5);
        return real_setsockopt(fd, level, name, &x, sizeof x);
    }
    return real_setsockopt(fd, level, name, val, len);
}

int getsockopt(int fd, int level, int name, void *restrict val, socklen_t *restrict len)
{
    resolve();
    int r = real_getsockopt(fd, level, name, val, len);
    struct vt_view v;
    if (r != 0 || !val || !len || !vt_view(&v))
        return r;
    if (is_timeval_opt(level, name) && *len >= 16)
        scale_timeval(val, 1.0 / v.tdf);
    else if (is_tcp_int_opt(level, name) && *len >= (socklen_t)sizeof(int)) {
        int x;
        memcpy(&x, val, sizeof x);
        x = (int)((double)x / v.tdf + 0.5);
        memcpy(val, &x, sizeof x);
    }
    return r;
}
