/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/signalfd.h>

/* What a signal read from prebind's signalfd means: the one rule for the
 * supervisor and for --accept. */
struct signal_verdict {
        bool reap;      /* SIGCHLD: reap, never forward */
        bool own;       /* prebind's own SIGPIPE: about its output, drop it */
        bool shutdown;  /* SIGTERM, SIGINT, or a hangup from the terminal */
        bool forward;   /* pass it on to COMMAND */
        bool stop_self; /* a terminal stop (Ctrl-Z): stop prebind too */
};

/* command_has_own_group: COMMAND runs in a process group of its own
 * (--group), so signals the kernel sends to prebind's group missed it. */
struct signal_verdict signal_classify(const struct signalfd_siginfo *si, bool command_has_own_group);

/* Block every signal but SIGKILL and SIGSTOP and read them from a new
 * signalfd (close-on-exec, non-blocking), so that none is lost between
 * fork() and the loop. Inherited SIG_IGN dispositions are reset first: an
 * ignored signal is discarded even while blocked, and an ignored SIGCHLD
 * would make the kernel reap COMMAND and lose its status. Returns the fd
 * or -errno. */
int signals_block_all(void);

/* Read every pending signal from a signalfd and hand each, with its
 * verdict, to handler. */
typedef void (*signal_handler)(const struct signalfd_siginfo *si, struct signal_verdict verdict, void *userdata);
void signals_drain(int signal_fd, bool command_has_own_group, signal_handler handler, void *userdata);

/* Before exec, in the child (system calls only): dispositions set to
 * SIG_IGN and the blocked mask survive exec, so the program gets the
 * defaults, whatever prebind inherited or set. dispositions_are_default:
 * only the mask is left to clear (signals_block_all() ran). */
void signals_reset(bool dispositions_are_default);
