/* cairn/model.h — placeholder, being written */
#ifndef CAIRN_MODEL_H
#define CAIRN_MODEL_H
#endif
