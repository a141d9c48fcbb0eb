import{a,b}from"./chunk-RWDCU62C.js";import"./chunk-DLZ2INEX.js";export{b as sessionsPage,a as usageBySession};
