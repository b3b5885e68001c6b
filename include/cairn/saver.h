/* cairn/saver.h — placeholder, being written */
#ifndef CAIRN_SAVER_H
#define CAIRN_SAVER_H
#endif
