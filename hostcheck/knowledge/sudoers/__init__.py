"""A bounded reader of sudoers(5): what sudo grants one account, judged the way sudo judges it.

Enough of the grammar to answer "what may this account run as root, without a password, and
is it logged?" for the agent accounts the audit looks at, following sudo's own rules where they
decide that answer (sudoers(5) and sudo's plugins/sudoers/match.c, gram.y and toke.l in
sudo-project/sudo, read 2026-12-03):

- every list (users, hosts, run-as users, commands, alias members) is read from its end and the
  last entry that matches decides (``userlist_matches`` walks it in reverse): ``!agent, ALL``
  names the agent, ``ALL, !agent`` does not;
- across the files, the last rule that matches a command decides ("where there are multiple
  matches, the last match is used"), so a later ``!ALL`` takes an earlier ``ALL`` back;
- a Runas_Spec and the tags of one command spec carry to the specs after it in the same rule
  until another is given (``(root) ALL, (nobody) /bin/true`` runs ALL as root);
- aliases expand wherever they are named; ``#uid``, ``%group`` and ``%#gid`` match by number;
- a run-as group list lets the command run with that group, even as the account itself
  (``(:ALL)``); a group that gives root by another name (docker, disk, lxd) counts as root;
- ``@include``/``#include`` paths may be quoted; a relative one lies in the including file's
  directory; ``%h`` is the short host name; an ``@includedir`` is read in lexical order,
  skipping names that end in '~' or contain '.', at the place of the directive; a missing
  include directory is ignored, as sudo ignores it.

Input is treated as hostile: each file, line, list and include chain is bounded and include
loops are cut. What cannot be known is said, never guessed: a file or directory that cannot be
read, the part of a file past the size bound, the files of a directory past the count bound,
an include chain past the depth bound and a line not understood that may name the account are
each a stated gap, and the answer is then "unknown" (an unrestricted grant read before the gap
stands: a rule the reader could not see may narrow it, but the readable files already give it).

The package's modules: ``grammar`` reads one file's text into rules, aliases and Defaults;
``includes`` follows the include directives over the files, bounded, and keeps them as read
(the evidence collectors store); ``matching`` decides what the rules grant one account;
``recorded`` replays a collector's record and matches a recorded account, for the checks.
Pure: reading files is the caller's job.
"""
