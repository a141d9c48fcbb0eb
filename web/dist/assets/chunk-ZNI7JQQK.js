import{a,b}from"./chunk-QZEV4MEG.js";import"./chunk-6GU2PLKT.js";export{b as sessionsPage,a as usageBySession};
