/*
 * Internals shared by the clock shim's files (shim/vt*.c): the page, the real
 * functions the hooks call, and the conversions between real and virtual time.
 * Everything here is hidden: only the hooks are exported.
 */
#ifndef FIDELNET_VT_INTERNAL_H
#define FIDELNET_VT_INTERNAL_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>


#define VT_HIDDEN __attribute__((visibility("hidden")))

#define VT_MAGIC 0x74566e66u /* "fnVt" */
#define VT_VERSION 1u
#define NS 1000000000LL
#define CHUNK_NS 50000000LL /* relative waits re-check the TDF this often */
#define MAX_TIMERFDS 1024

enum { FAM_REALTIME = 0, FAM_MONOTONIC = 1, FAM_BOOTTIME = 2, FAM_CPU = 3, FAM_NONE = 4 };

struct vt_anchor {
    int64_t real_ns;
    int64_t virt_ns;
};

struct vt_page {
    uint32_t magic;
    uint32_t version;
    uint32_t seq; /* odd while the writer is changing the page */
    uint32_t pad;
    double tdf;
    struct vt_anchor a[3];
};

struct vt_view {
    double tdf;
    struct vt_anchor a[3];
};

VT_HIDDEN extern const struct vt_page *page;
VT_HIDDEN extern int inited;

VT_HIDDEN extern int (*real_clock_gettime)(clockid_t, struct timespec *);
VT_HIDDEN extern int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
VT_HIDDEN extern int (*real_poll)(struct pollfd *, nfds_t, int);
VT_HIDDEN extern int (*real_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
VT_HIDDEN extern int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
VT_HIDDEN extern int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                           const sigset_t *);
VT_HIDDEN extern int (*real_epoll_wait)(int, struct epoll_event *, int, int);
VT_HIDDEN extern int (*real_epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
VT_HIDDEN extern int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
VT_HIDDEN extern int (*real_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                                  const struct timespec *);
VT_HIDDEN extern int (*real_sem_timedwait)(sem_t *, const struct timespec *);
VT_HIDDEN extern int (*real_sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
VT_HIDDEN extern int (*real_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
VT_HIDDEN extern int (*real_timedjoin)(pthread_t, void **, const struct timespec *);
VT_HIDDEN extern long (*real_syscall)(long, ...);
VT_HIDDEN extern int (*real_timerfd_create)(int, int);
VT_HIDDEN extern int (*real_timerfd_settime)(int, int, const struct itimerspec *, struct itimerspec *);
VT_HIDDEN extern int (*real_timerfd_gettime)(int, struct itimerspec *);
VT_HIDDEN extern unsigned (*real_alarm)(unsigned);
VT_HIDDEN extern int (*real_setitimer)(__itimer_which_t, const struct itimerval *, struct itimerval *);
VT_HIDDEN extern int (*real_getitimer)(__itimer_which_t, struct itimerval *);


VT_HIDDEN void vt_init(void);
VT_HIDDEN int vt_view(struct vt_view *v);
VT_HIDDEN int family(clockid_t c);
VT_HIDDEN int64_t real_now(clockid_t c);
VT_HIDDEN int64_t to_virt(const struct vt_view *v, int fam, int64_t real);
VT_HIDDEN int64_t to_real(const struct vt_view *v, int fam, int64_t virt);
VT_HIDDEN clockid_t base_clock(int fam);
VT_HIDDEN int read_with_page(clockid_t c, struct timespec *tp, int *r, struct vt_view *v);
VT_HIDDEN int64_t virt_now(struct vt_view *v, int fam);
VT_HIDDEN struct timespec real_deadline(const struct vt_view *v, clockid_t c,
                                        const struct timespec *abs);

static inline int64_t ts_ns(const struct timespec *t) { return t->tv_sec * NS + t->tv_nsec; }

static inline struct timespec ns_ts(int64_t ns)
{
    struct timespec t;
    t.tv_sec = ns / NS;
    t.tv_nsec = ns % NS;
    if (t.tv_nsec < 0) {
        t.tv_nsec += NS;
        t.tv_sec -= 1;
    }
    return t;
}

#endif
