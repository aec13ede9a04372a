/* The clock shim's timers: timerfd, interval timers, alarm. See vt.c. */
#include "vt_internal.h"

static unsigned char timerfd_clock[MAX_TIMERFDS]; /* clock id + 1 of our timerfds */


int timerfd_create(int c, int flags)
{
    if (!inited)
        vt_init();
    int fd = real_timerfd_create(c, flags);
    if (fd >= 0 && fd < MAX_TIMERFDS)
        timerfd_clock[fd] = (unsigned char)(c + 1);
    return fd;
}

static struct timespec scale(const struct timespec *t, double f)
{
    return ns_ts((int64_t)((double)ts_ns(t) * f));
}

int timerfd_settime(int fd, int flags, const struct itimerspec *nv, struct itimerspec *old)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!nv || !vt_view(&v))
        return real_timerfd_settime(fd, flags, nv, old);
    clockid_t c = (fd >= 0 && fd < MAX_TIMERFDS && timerfd_clock[fd])
                      ? (clockid_t)(timerfd_clock[fd] - 1)
                      : CLOCK_MONOTONIC;
    struct itimerspec t;
    t.it_interval = scale(&nv->it_interval, v.tdf);
    if (ts_ns(&nv->it_value) == 0)
        t.it_value = nv->it_value; /* disarm */
    else if (flags & TFD_TIMER_ABSTIME)
        t.it_value = real_deadline(&v, c, &nv->it_value);
    else
        t.it_value = scale(&nv->it_value, v.tdf);
    int r = real_timerfd_settime(fd, flags, &t, old);
    if (r == 0 && old) {
        old->it_value = scale(&old->it_value, 1.0 / v.tdf);
        old->it_interval = scale(&old->it_interval, 1.0 / v.tdf);
    }
    return r;
}

int timerfd_gettime(int fd, struct itimerspec *cur)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    int r = real_timerfd_gettime(fd, cur);
    if (r == 0 && vt_view(&v)) {
        cur->it_value = scale(&cur->it_value, 1.0 / v.tdf);
        cur->it_interval = scale(&cur->it_interval, 1.0 / v.tdf);
    }
    return r;
}

static struct timeval tv_scale(const struct timeval *t, double f)
{
    int64_t us = (int64_t)((double)(t->tv_sec * 1000000LL + t->tv_usec) * f);
    struct timeval out = {.tv_sec = us / 1000000, .tv_usec = us % 1000000};
    return out;
}

int setitimer(__itimer_which_t which, const struct itimerval *restrict nv,
              struct itimerval *restrict old)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!nv || which != ITIMER_REAL || !vt_view(&v))
        return real_setitimer(which, nv, old);
    struct itimerval t = {.it_interval = tv_scale(&nv->it_interval, v.tdf),
                          .it_value = tv_scale(&nv->it_value, v.tdf)};
    int r = real_setitimer(which, &t, old);
    if (r == 0 && old) {
        old->it_interval = tv_scale(&old->it_interval, 1.0 / v.tdf);
        old->it_value = tv_scale(&old->it_value, 1.0 / v.tdf);
    }
    return r;
}

int getitimer(__itimer_which_t which, struct itimerval *cur)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    int r = real_getitimer(which, cur);
    if (r == 0 && which == ITIMER_REAL && vt_view(&v)) {
        cur->it_interval = tv_scale(&cur->it_interval, 1.0 / v.tdf);
        cur->it_value = tv_scale(&cur->it_value, 1.0 / v.tdf);
    }
    return r;
}

unsigned alarm(unsigned seconds)
{
    struct itimerval nv = {{0, 0}, {seconds, 0}}, old;
    if (setitimer(ITIMER_REAL, &nv, &old) != 0)
        return 0;
    return (unsigned)old.it_value.tv_sec + (old.it_value.tv_usec > 0);
}

/* --- POSIX timers ---------------------------------------------------------------- */

#define MAX_POSIX_TIMERS 1024
static unsigned char posix_clock[MAX_POSIX_TIMERS]; /* clock id + 1, by kernel timer id */
static int (*real_timer_create)(clockid_t, struct sigevent *, timer_t *);
static int (*real_timer_settime)(timer_t, int, const struct itimerspec *, struct itimerspec *);
static int (*real_timer_gettime)(timer_t, struct itimerspec *);

static void resolve_posix(void)
{
    if (!inited)
        vt_init();
    if (__atomic_load_n(&real_timer_gettime, __ATOMIC_ACQUIRE))
        return;
    real_timer_create = (__typeof__(real_timer_create))dlsym(RTLD_NEXT, "timer_create");
    real_timer_settime = (__typeof__(real_timer_settime))dlsym(RTLD_NEXT, "timer_settime");
    __atomic_store_n(&real_timer_gettime,
                     (__typeof__(real_timer_gettime))dlsym(RTLD_NEXT, "timer_gettime"),
                     __ATOMIC_RELEASE);
}

/* glibc's timer_t holds the kernel's timer id (small integers per process). */
static long timer_slot(timer_t t) { return (long)(intptr_t)t; }

int timer_create(clockid_t c, struct sigevent *restrict ev, timer_t *restrict id)
{
    resolve_posix();
    int r = real_timer_create(c, ev, id);
    if (r == 0 && timer_slot(*id) >= 0 && timer_slot(*id) < MAX_POSIX_TIMERS && c >= 0)
        posix_clock[timer_slot(*id)] = (unsigned char)(c + 1);
    return r;
}

int timer_settime(timer_t id, int flags, const struct itimerspec *restrict nv,
                  struct itimerspec *restrict old)
{
    struct vt_view v;
    resolve_posix();
    if (!nv || !vt_view(&v))
        return real_timer_settime(id, flags, nv, old);
    long s = timer_slot(id);
    clockid_t c = (s >= 0 && s < MAX_POSIX_TIMERS && posix_clock[s])
                      ? (clockid_t)(posix_clock[s] - 1)
                      : CLOCK_REALTIME;
    if (family(c) == FAM_CPU || family(c) == FAM_NONE)
        return real_timer_settime(id, flags, nv, old);
    struct itimerspec t;
    t.it_interval = scale(&nv->it_interval, v.tdf);
    if (ts_ns(&nv->it_value) == 0)
        t.it_value = nv->it_value; /* disarm */
    else if (flags & TIMER_ABSTIME)
        t.it_value = real_deadline(&v, c, &nv->it_value);
    else
        t.it_value = scale(&nv->it_value, v.tdf);
    int r = real_timer_settime(id, flags, &t, old);
    if (r == 0 && old) {
        old->it_value = scale(&old->it_value, 1.0 / v.tdf);
        old->it_interval = scale(&old->it_interval, 1.0 / v.tdf);
    }
    return r;
}

int timer_gettime(timer_t id, struct itimerspec *cur)
{
    struct vt_view v;
    resolve_posix();
    int r = real_timer_gettime(id, cur);
    long s = timer_slot(id);
    clockid_t c = (s >= 0 && s < MAX_POSIX_TIMERS && posix_clock[s])
                      ? (clockid_t)(posix_clock[s] - 1)
                      : CLOCK_REALTIME;
    if (r == 0 && family(c) != FAM_CPU && vt_view(&v)) {
        cur->it_value = scale(&cur->it_value, 1.0 / v.tdf);
        cur->it_interval = scale(&cur->it_interval, 1.0 / v.tdf);
    }
    return r;
}
