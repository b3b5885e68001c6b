/* rm_tree: removes a test's scratch directory (rm -rf), for the suites'
 * .fini. Directories are made writable first, so tests that take away
 * permissions clean up too. Include after the POSIX feature macro. */
#ifndef CAIRN_TESTS_RM_TREE_H
#define CAIRN_TESTS_RM_TREE_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void rm_tree(const char *path) {
  struct stat sb;
  if (lstat(path, &sb) != 0) return;
  if (!S_ISDIR(sb.st_mode)) {
    unlink(path);
    return;
  }
  chmod(path, 0700);
  DIR *d = opendir(path);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char sub[1200];
      snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
      rm_tree(sub);
    }
    closedir(d);
  }
  rmdir(path);
}

#endif
