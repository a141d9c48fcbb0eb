import{a,b}from"./chunk-O5RCT46X.js";import"./chunk-I4J3XQRV.js";export{b as sessionsPage,a as usageBySession};
